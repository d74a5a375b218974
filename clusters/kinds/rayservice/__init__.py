"""The Ray Serve service kind: a RayService kept up from admission to deletion."""
