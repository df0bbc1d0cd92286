"""`python -m hfsweep.datasets_offline DIR`: write the offline proxy datasets (see `hfsweep.data.offline`)."""

from hfsweep.data.offline import main

if __name__ == "__main__":
    main()
