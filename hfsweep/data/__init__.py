"""The data room: sources (pydoc prose, the hub, local files through `datasets`' builders),
tokenizers trained on the training split, preparation once per sweep into a content-addressed
cache, and the offline proxy datasets."""
