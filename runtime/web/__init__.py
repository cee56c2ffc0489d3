"""The web page: the app, its views of the store, page access, and the live change stream."""
