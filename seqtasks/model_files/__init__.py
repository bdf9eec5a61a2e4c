"""What a trained model is and where it lives: its specification (`spec`) and identity
(`identity`), checkpoints and Hub-layout model folders (`folder`, with its model `card`),
models by name on the Hugging Face Hub (`hub`), and opening any of them (`sources`)."""
