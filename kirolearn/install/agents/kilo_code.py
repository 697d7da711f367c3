"""Kilo Code CLI's installer targets: opencode's plugin and config edits (Kilo Code is an opencode fork that
loads opencode plugins), in Kilo Code's own files: `~/.config/kilo/kilo.json` or a project's `kilo.json`.

Measured with `@kilocode/cli` 7.7.7: a config without `$schema` is rewritten by Kilo Code on load (it
adds one), so a kilo.json install creates starts with it; on its first run Kilo Code creates
`~/.config/kilo/kilo.jsonc` holding only `$schema`, and merges it with kilo.json.
The hook-time half of this agent lives in kirolearn.capture.agents.kilo_code.
"""

from kirolearn.capture.agents.kilo_code import NAME
from kirolearn.install.agents.opencode import Wiring

SCHEMA = "https://app.kilo.ai/config.json"

# the installer half the registry names (plan_install, plan_uninstall, wired, KINDS)
KILO = Wiring(NAME, "kilo", "kilo.json", "kilo-plugin.js", seed={"$schema": SCHEMA}, merged_jsonc=True)
