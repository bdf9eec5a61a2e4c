"""A config error in one line: jsonargparse prints the whole usage (some 50 lines) first and the
key at fault later, in its own nested words; the line made here names the key as it is spelled
on the command line and says what is wrong with it. Read by the command line
(`seqtasks.cli.config_errors`) and by the checks of a model file's specification."""

from __future__ import annotations

import re

# What jsonargparse's error messages say, step by step from the outer key to the fault.
_ERROR_STEP = re.compile(
    r'Parser key "(?P<key>[^"]+)":(?P<list>\s+Does not validate[^\n]*\n\s+Subtypes: \[list\[)?'
    r"|Problem with given class_path '(?P<class_path>[^']+)':"
    r"|Option '(?P<unknown>[^']+)' is not accepted"
    r"|does not accept option '(?P<option>[^']+)'"
    r"|Key \"(?P<required>[^\"]+)\" is required"
    r"|Expected a <class '(?P<type>(?!NoneType')\w+)'>"
)
_GIVEN = re.compile(r"(?:Got|Given) value: (.*?)(?:\. Got value: .*)?$", re.MULTILINE)
_NAMED_CLASS = re.compile(r"Namespace\(class_path='([^']+)'")
_YAML_PLACE = re.compile(r'in "<unicode string>", (line \d+, column \d+)')


def config_error_summary(message: str) -> str:
    """One line out of a jsonargparse error message: the config key at fault, spelled as on
    the command line (`model.init_args.decoder.init_args.hidden_size`), and what is wrong with
    it. A message it does not recognise gives its own first line."""
    if message.startswith("Problems parsing config"):  # YAML syntax: say where
        problem = [line for line in message.splitlines()[1:] if not line.startswith(" ")]
        places = _YAML_PLACE.findall(message)
        where = f" at {places[-1]}" if places else ""
        return f"the config is not valid YAML{where}: {' '.join(problem) or message}"
    keys: list[str] = []
    class_path, in_list, problem = None, False, None
    for step in _ERROR_STEP.finditer(message):
        # what follows the step on its line, or on the next line, when that is no step itself
        rest = message[step.end() :].lstrip(" ").split("\n", 2)
        follows = (rest[0] or (rest[1] if len(rest) > 1 else "")).strip()
        if _ERROR_STEP.search(follows) or follows.startswith("Does not validate"):
            follows = ""
        if step["key"]:
            keys.append(step["key"] if not keys else f"init_args.{step['key']}")
            in_list, problem, class_path = bool(step["list"]), follows or problem, None
        elif step["class_path"]:
            class_path = step["class_path"]
            if keys and in_list:
                keys[-1] += f"[{class_path.rsplit('.', 1)[-1]}]"
            if follows:
                problem = f"cannot use {class_path!r}: {follows}"
                keys.append("class_path")
        elif step["unknown"]:
            keys.append(step["unknown"] if not keys else f"init_args.{step['unknown']}")
            named = _NAMED_CLASS.search(message, step.end())  # a nested value names it after
            owner = class_path or (named[1] if named else "its class")
            return f"{'.'.join(keys)}: not a parameter of {owner}"
        elif step["option"] or step["required"]:
            reason = "no such option" if step["option"] else "required, but not given"
            return f"{step['option'] or step['required']}: {reason}"
        else:
            given = _GIVEN.search(message, step.end())
            got = f", got {given[1][:80]!r}" if given else ""
            article = "an" if step["type"][0] in "aeiou" else "a"
            return f"{'.'.join(keys) or 'a value'}: expected {article} {step['type']}{got}"
    if keys and problem:
        return f"{'.'.join(keys)}: {problem}"
    return message.strip().splitlines()[0] if message.strip() else "invalid arguments"
