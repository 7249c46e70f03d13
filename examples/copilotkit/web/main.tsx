/**
 * CopilotKit's chat on a PauseMesh thread. The thread id is in the URL; the question comes from
 * `useInterrupt` and is rendered from its `responseSchema`; refusals show PauseMesh's code.
 *
 * After any failed run the page restores the thread (connect, served from PauseMesh by the
 * durable runner): a tab whose answer lost a race then shows what the other tab booked, and a
 * refused answer gets a live question again (`useInterrupt` ignores a second answer to the
 * question it already resolved until a run sets the question anew).
 */

import { StrictMode, useEffect, useRef, useState } from "react";
import type { ReactElement } from "react";
import { createRoot } from "react-dom/client";
import {
  CopilotChat,
  CopilotKitProvider,
  useAgent,
  useCopilotKit,
  useInterrupt,
} from "@copilotkit/react-core/v2";
import "@copilotkit/react-core/v2/styles.css";

import { InterruptForm } from "./interrupt-form";
import { threadFromUrl } from "./thread";
import "./page.css";

interface Booking {
  flight: string;
  confirmation: string;
}

function bookingsOf(state: unknown): Booking[] {
  const found = (state as { bookings?: unknown } | null)?.bookings;
  return Array.isArray(found) ? (found as Booking[]) : [];
}

function Question(): null {
  useInterrupt({
    render: ({ interrupt, resolve, cancel }) =>
      interrupt ? <InterruptForm interrupt={interrupt} resolve={resolve} cancel={cancel} /> : <></>,
  });
  return null;
}

function Thread({ threadId }: { threadId: string }): ReactElement {
  const { agent } = useAgent();
  const { copilotkit } = useCopilotKit();
  const [notice, setNotice] = useState<string | null>(null);
  const syncing = useRef(false);

  useEffect(() => {
    const resync = (): void => {
      // Wait for the failed run to end, then restore the thread as PauseMesh has it.
      if (agent.isRunning) {
        setTimeout(resync, 50);
        return;
      }
      syncing.current = true;
      // The client refuses any run or connect while it still holds the refused question
      // ("pending interrupt(s) not addressed by resume"); the connect brings back what is open.
      agent.pendingInterrupts = [];
      void copilotkit
        .connectAgent({ agent })
        .catch(() => undefined)
        .finally(() => {
          syncing.current = false;
        });
    };
    const subscription = agent.subscribe({
      onRunStartedEvent: () => {
        if (!syncing.current) setNotice(null);
      },
      onRunErrorEvent: ({ event }) => {
        setNotice(`${event.message} (${event.code ?? "RUN_ERROR"})`);
        setTimeout(resync, 0);
      },
      onRunFailed: ({ error }) => {
        setNotice(error.message);
        setTimeout(resync, 0);
      },
    });
    return () => subscription.unsubscribe();
  }, [agent, copilotkit]);

  const bookings = bookingsOf(agent.state);
  return (
    <>
      <header>
        <h1>CopilotKit on PauseMesh</h1>
        <p className="thread">
          Thread <code>{threadId}</code>
        </p>
      </header>
      <main>
        <div role="alert" id="notice" hidden={notice === null}>
          {notice}
        </div>
        <CopilotChat threadId={threadId} />
      </main>
      <aside aria-label="Bookings">
        <h2>Your bookings</h2>
        {bookings.length === 0 ? (
          <p>No booking yet.</p>
        ) : (
          <ul>
            {bookings.map((booking) => (
              <li key={booking.confirmation}>
                {booking.flight} · {booking.confirmation}
              </li>
            ))}
          </ul>
        )}
      </aside>
    </>
  );
}

const threadId = threadFromUrl(window.location, window.history);
const root = document.getElementById("root");
if (root === null) throw new Error("no #root element");
createRoot(root).render(
  <StrictMode>
    <CopilotKitProvider runtimeUrl="/api/copilotkit">
      <Question />
      <Thread threadId={threadId} />
    </CopilotKitProvider>
  </StrictMode>,
);
document.body.dataset.ready = "true";
