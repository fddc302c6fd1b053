"""Pickles read without running them: :mod:`.unpickler` (the restricted unpickler), :mod:`.rebuild` (what
torch's rebuild functions become: tensor descriptions), :mod:`.opaque` (the inert stand-in for any other
class), :mod:`.opcodes` (the opcode walk that lists what a pickle names), :mod:`.globals` (the one rule for
what a pickle global is) and :mod:`.nn_classes` (the torch.nn module classes a pickle may name as data)."""
