"""Running ttseval's services: the local stack supervisor (stack.py), container images, Kubernetes manifests."""
