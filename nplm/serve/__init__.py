"""`nplm serve`: a trained model behind HTTP (app: the server; requests: what it accepts)."""
