"""What a trained model is and where it lives: its specification (`spec`), identity
(`identity`) and provenance (`provenance`), checkpoints and Hub-layout model folders
(`folder`, with its model `card`), models by name on the Hugging Face Hub (`hub`), and
opening any of them (`sources`)."""
