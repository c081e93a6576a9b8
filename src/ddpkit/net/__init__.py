"""Network facts and choices: interfaces (:mod:`.interfaces`), routes (:mod:`.route`), and the
pure selection of the interface for inter-node traffic (:mod:`.select`).

Import the submodules directly (``from ddpkit.net.select import recommend``); this package module
stays empty so importing one part never pays for the others.
"""
