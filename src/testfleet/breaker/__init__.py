"""The runner-class breaker (#41): a lane whose runners failed the same infrastructure way
in consecutive default-branch runs is held back (fate ``runner-broken``, a coverage hole
everywhere) and only its probe runs, until the probe passes ``close_after`` times in a row.

Pure: the state machine (:mod:`testfleet.breaker.machine`) folds one run's outcome of a
lane into the lane's state; the settings (:mod:`testfleet.breaker.settings`) say which
lanes opted in and with which counts; :mod:`testfleet.breaker.runners` reads which
runner labels are online. Reading and writing the state is the store's
(``store/breakers.py``) and the application floor's (``app/breaker.py``); the planner gets
the state as a value.
"""
