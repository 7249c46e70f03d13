// A React component on the reconnecting client (React 18+). Not built here: frontend-demo has
// no React; copy it into an app that has.
import { useEffect, useMemo, useState } from "react";
import { PauseMeshAgent, PauseMeshRefusal } from "./pausemesh-agent";

export function Chat({ threadId }: { threadId: string }) {
  const agent = useMemo(() => new PauseMeshAgent({ url: "/agui", threadId }), [threadId]);
  const [, redraw] = useState(0);
  const [notice, setNotice] = useState("");
  const [missing, setMissing] = useState(false);
  useEffect(() => {
    const { unsubscribe } = agent.subscribe({ onMessagesChanged: () => redraw((n) => n + 1) });
    let tail: { stop(): void } | undefined;
    agent
      .restore()
      .then(() => {
        redraw((n) => n + 1);
        tail = agent.follow({
          onEvent: ({ event }) => {
            if (event.type === "RUN_FINISHED") void agent.restore().then(() => redraw((n) => n + 1));
          },
          onStatus: (status) => setNotice(status === "reconnecting" ? "Reconnecting…" : ""),
        });
      })
      .catch((error: unknown) => {
        if (error instanceof PauseMeshRefusal && error.kind === "not_found") setMissing(true);
      });
    return () => {
      unsubscribe();
      tail?.stop();
    };
  }, [agent]);
  const act = (call: () => Promise<unknown>) =>
    call().catch((error: unknown) =>
      setNotice(error instanceof PauseMeshRefusal ? `${error.kind}: ${error.message}` : "Offline: not sent."),
    );
  if (missing) return <p>This conversation is not available.</p>;
  return (
    <section>
      <ol>
        {agent.messages.map((m) => (
          <li key={m.id}>{`${m.role}: ${String(m.content ?? "")}`}</li>
        ))}
      </ol>
      {agent.pendingInterrupts.map((i) => (
        <button key={i.id} onClick={() => act(() => agent.answer(new Map([[i.id, { flight: "PM101" }]])))}>
          {i.message}
        </button>
      ))}
      <form
        onSubmit={(e) => {
          e.preventDefault();
          const input = e.currentTarget.elements.namedItem("text") as HTMLInputElement;
          void act(() => agent.send(input.value));
          input.value = "";
        }}
      >
        <input name="text" aria-label="Message" disabled={agent.pendingInterrupts.length > 0} />
      </form>
      <p role="status">{notice}</p>
    </section>
  );
}
