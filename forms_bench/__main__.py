"""``python -m forms_bench``: regenerate the frozen test set and its checksum."""

from forms_bench.suite import write_test_set

if __name__ == "__main__":
    print(f"wrote {write_test_set()}")
