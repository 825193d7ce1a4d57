"""Steering: vectors from contrastive level pairs added at a hook during real play, and retargeting by
writing a location into the channels that track an entity (``analyze steer``)."""
