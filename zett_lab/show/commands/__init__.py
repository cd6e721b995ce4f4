"""The ``zett-lab`` commands (:mod:`zett_lab.show.cli` is the entry point): those over recorded conversations
(:mod:`.recorded`), the report (:mod:`.report`), the notebooks (:mod:`.notebooks`), and what they share
(:mod:`.common`)."""
