// A plain page on the reconnecting client: no framework, the DOM and PauseMeshAgent.
// <ol id="log"></ol> <div id="question"></div> <p id="status"></p>
// <form id="composer"><input id="text" /><button>Send</button></form>
import { PauseMeshAgent, PauseMeshOffline, PauseMeshRefusal } from "../src/pausemesh-agent.js";

export async function mountChat(doc: Document, threadId: string): Promise<PauseMeshAgent> {
  const agent = new PauseMeshAgent({ url: "/agui", threadId });
  const status = doc.getElementById("status") as HTMLElement;
  const render = (): void => {
    const log = doc.getElementById("log") as HTMLOListElement;
    log.replaceChildren(
      ...agent.messages.map((message) => {
        const item = doc.createElement("li");
        item.textContent = `${message.role}: ${String(message.content ?? "")}`;
        return item;
      }),
    );
    const question = doc.getElementById("question") as HTMLElement;
    question.replaceChildren(
      ...agent.pendingInterrupts.map((interrupt) => {
        const button = doc.createElement("button");
        button.textContent = `Answer: ${interrupt.message ?? "the question"}`;
        button.onclick = () => void act(() => agent.answer(new Map([[interrupt.id, { flight: "PM101" }]])));
        return button;
      }),
    );
  };
  const act = async (call: () => Promise<unknown>): Promise<void> => {
    try {
      await call();
      status.textContent = "";
    } catch (error) {
      if (error instanceof PauseMeshOffline) status.textContent = "Offline: not sent, try again.";
      else if (error instanceof PauseMeshRefusal && error.kind === "race") {
        status.textContent = "Answered elsewhere first; showing what was recorded.";
        await agent.restore();
      } else if (error instanceof PauseMeshRefusal) status.textContent = `${error.kind}: ${error.message}`;
      else throw error;
    }
    render();
  };
  agent.subscribe({ onMessagesChanged: render });
  try {
    await agent.restore(); // a reload shows the conversation and its open question
  } catch (error) {
    if (!(error instanceof PauseMeshRefusal && error.kind === "not_found")) throw error;
  }
  render();
  // Other tabs' runs and a manager's decision arrive on the tail; restore to show them.
  agent.follow({
    onEvent: ({ event }) => {
      if (event.type === "RUN_FINISHED") void agent.restore().then(render);
    },
    onStatus: (tail) => {
      status.textContent = tail === "reconnecting" ? "Reconnecting…" : "";
    },
  });
  const form = doc.getElementById("composer") as HTMLFormElement;
  form.onsubmit = (event) => {
    event.preventDefault();
    const input = doc.getElementById("text") as HTMLInputElement;
    const text = input.value.trim();
    input.value = "";
    if (text !== "") void act(() => agent.send(text));
  };
  return agent;
}
