"""A CPU stand-in for KubeRay's StableDiffusion Ray Serve sample, run by kubesim's real Ray
heads (``--real-ray``); see ``text_to_image.py``."""
