"""Sub-commands of ``memoryctl``; each module defines ``register(subparsers)``."""
