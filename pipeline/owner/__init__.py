"""An owner's controls of one agent (design §13 "Owner controls"): Memory Instructions and
pauses, as plain functions over ``AgentSettings``. The HTTP routes, ``memoryctl`` and the
formation stages all go through here."""
