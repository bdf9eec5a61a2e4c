"""Lightning's CLI (`main.py`: `seqtasks fit | validate | test | predict`), what it checks before
a run, and the argument types the commands share (`arguments.py`). The `seqtasks` command itself,
which chooses among these and the other commands, is `seqtasks.cli.commands`."""
