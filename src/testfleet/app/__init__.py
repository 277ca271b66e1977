"""The application floor: what one command does, between its flags (``cli/``) and the
features it uses. It opens the history once per command, makes the one plan every path
uses, and gathers what ``report/`` renders; the floors below get values, not handles."""
