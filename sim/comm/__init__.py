"""Communication: topology (where ranks sit, what joins them), NCCL-like algorithm choice,
and running one step on several ranks (sim.comm.parallel). Cost functions stay in
sim/costmodel/collective.py; the engine's rendezvous and link sharing in sim/engine.py."""
