"""hfsweep's Hydra configs, importable as hfsweep.conf so that Hydra finds them as pkg://hfsweep.conf
in a checkout (an editable install maps this folder) and in an installed wheel alike."""
