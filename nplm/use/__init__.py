"""Using a trained model: loading it from its workdir (trained), exact evaluation on any
data, scoring sentences, generating text, nearest neighbours and the embeddings' scores."""
