"""advsim: co-evolution of curriculum, adversary and executor LoRA adapters (AdvSim2Real).

Importing ``advsim`` registers the Gymnasium environments:

- ``advsim/WebForms-v0`` — the form benchmark in the web world (sim or real browser);
- ``advsim/EvidenceLedger-v0`` — the evidence-ledger tool world (SafeActBench).
"""

from gymnasium.envs.registration import register, registry

__version__ = "0.1.0"

if "advsim/WebForms-v0" not in registry:
    register(id="advsim/WebForms-v0", entry_point="advsim.envs.web_forms:WebFormsEnv")
if "advsim/EvidenceLedger-v0" not in registry:
    register(id="advsim/EvidenceLedger-v0", entry_point="advsim.envs.ledger:EvidenceLedgerEnv")
