"""The Hub dataset: the builder (`build`), the one Parquet reader that verify, scoring and the
Space share (`reader`), the checker (`verify`)."""
