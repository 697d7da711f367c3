// kirolearn for opencode: capture every turn, recall memory into the system prompt.
// Written by `kirolearn install --agent opencode`; `kirolearn uninstall` removes it. kirolearn-hook
// runs as a subprocess per event (the same stdlib-only hook every agent uses); any failure here is
// swallowed, so kirolearn can never break a session.
import { spawnSync } from "node:child_process";
import { appendFileSync, existsSync, mkdirSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";

const HOOK = __KIROLEARN_HOOK_ARGV__;
const HOOK_ENV = __KIROLEARN_HOOK_ENV__;
// Portable wiring (`--portable`): HOOK is `kirolearn-hook` found on PATH; when PATH lacks it, this line
// goes once to stderr and to hook.log of the kirolearn home when there is one (doctor counts it).
const NOT_ON_PATH = __KIROLEARN_NOT_ON_PATH__;
const TIMEOUT_MS = 5000;
let missingSaid = false;

function sayMissing() {
  if (missingSaid || !NOT_ON_PATH) return;
  missingSaid = true;
  try {
    process.stderr.write(NOT_ON_PATH + "\n");
  } catch {}
  try {
    const home = process.env.KIROLEARN_HOME || join(homedir(), ".kirolearn");
    if (!existsSync(home)) return;
    const logs = join(home, "logs");
    mkdirSync(logs, { recursive: true, mode: 0o700 });
    const stamp = new Date().toISOString().replace(/\.\d+Z$/, ".000Z");
    appendFileSync(join(logs, "hook.log"), `${stamp} ${NOT_ON_PATH}\n`, { mode: 0o600 });
  } catch {}
}

function hook(event, payload) {
  try {
    const result = spawnSync(HOOK[0], [...HOOK.slice(1), event], {
      input: JSON.stringify({ hook_event_name: event, ...payload }),
      env: { ...process.env, ...HOOK_ENV },
      timeout: TIMEOUT_MS,
      encoding: "utf8",
      stdio: ["pipe", "pipe", "ignore"],
    });
    if (result.error && result.error.code === "ENOENT") sayMissing();
    return result.status === 0 && typeof result.stdout === "string" ? result.stdout.trim() : "";
  } catch {
    return "";
  }
}

export const Kirolearn = async ({ directory }) => {
  const started = new Set(); // sessions whose start was recorded
  const recalled = new Map(); // session id -> {start, prompt}: what goes into the system prompt
  const roles = new Map(); // message id -> role
  const texts = new Map(); // session id -> Map(message id -> text parts by part id)

  function start(sessionID) {
    if (started.has(sessionID)) return;
    started.add(sessionID);
    const context = hook("session.created", { session_id: sessionID, cwd: directory });
    recalled.set(sessionID, { start: context, prompt: "" });
  }

  function finalText(sessionID) {
    const messages = texts.get(sessionID);
    if (!messages) return "";
    let last = "";
    for (const [messageID, parts] of messages) {
      if (roles.get(messageID) !== "assistant") continue;
      const text = [...parts.values()].join("\n").trim();
      if (text) last = text;
    }
    return last;
  }

  return {
    "chat.message": async (input, output) => {
      try {
        start(input.sessionID);
        const prompt = (output.parts || [])
          .filter((p) => p && p.type === "text" && !p.synthetic && typeof p.text === "string")
          .map((p) => p.text)
          .join("\n");
        const context = hook("chat.message", { session_id: input.sessionID, cwd: directory, prompt });
        recalled.get(input.sessionID).prompt = context;
      } catch {}
    },
    "experimental.chat.system.transform": async (input, output) => {
      try {
        const found = input && recalled.get(input.sessionID);
        if (!found || !Array.isArray(output.system)) return;
        for (const text of [found.start, found.prompt]) if (text) output.system.push(text);
      } catch {}
    },
    "tool.execute.after": async (input, output) => {
      try {
        start(input.sessionID);
        hook("tool.execute.after", {
          session_id: input.sessionID,
          cwd: directory,
          tool_name: input.tool,
          tool_input: input.args,
          tool_response: output && { title: output.title, output: output.output, metadata: output.metadata },
        });
      } catch {}
    },
    event: async ({ event }) => {
      try {
        const props = event.properties || {};
        if (event.type === "message.updated" && props.info) {
          roles.set(props.info.id, props.info.role);
        } else if (event.type === "message.part.updated" && props.part && props.part.type === "text") {
          const part = props.part;
          if (!texts.has(part.sessionID)) texts.set(part.sessionID, new Map());
          const messages = texts.get(part.sessionID);
          if (!messages.has(part.messageID)) messages.set(part.messageID, new Map());
          messages.get(part.messageID).set(part.id, part.text || "");
        } else if (event.type === "session.idle" && props.sessionID) {
          // the turn is over: its final answer is the newest assistant text of the session
          hook("session.idle", {
            session_id: props.sessionID,
            cwd: directory,
            assistant_response: finalText(props.sessionID),
          });
          texts.delete(props.sessionID);
        }
      } catch {}
    },
  };
};
