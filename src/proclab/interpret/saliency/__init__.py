"""What the agent is sensitive to: gradients on real frames and through the world model, the targets they
explain, the pictures made of them, and generative visualisation (``analyze saliency``, ``analyze visualize``)."""
