"""Tools built on the verbs: the offline ``demo``, the ``doctor``'s table, retrieval ``eval`` on BEIR
data, loading a ``bundle`` folder of resources, and ``eddi_import`` of EDDI agent exports."""
