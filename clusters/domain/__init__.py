"""The request's vocabulary, pure, beneath the models: states, shapes, environment, images."""
