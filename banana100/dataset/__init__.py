"""The Hub dataset: its folder layout (`layout`), the builder (`build`, over `checks` of the run
folders, Parquet `shards` and the `card`), the one Parquet reader that verify, scoring and the
Space share (`reader`), the checker (`verify`) and the uploader (`publish`)."""
