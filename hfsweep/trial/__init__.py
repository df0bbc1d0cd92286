"""The trial room, in the Tune trial's process: the function trainable (`trainable`), and the light
function and report forwarder shipped to Ray Train (`train_fn`). How results and pointer
checkpoints reach Tune is `hfsweep.contract`, shared with the loops. Kept free of heavy imports:
Train's controller unpickles `train_fn`."""
