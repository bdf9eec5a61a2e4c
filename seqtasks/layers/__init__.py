"""Building blocks of encoders and decoders, and `Memory`: what every encoder hands every
decoder."""
