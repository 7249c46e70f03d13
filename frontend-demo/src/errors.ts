// What a person is told when a run fails. Server codes are stable (PAUSEMESH_AGUI_*, THREAD_BUSY,
// …); the wording here is for the person at the keyboard, with the server's text as detail.

export type NoticeKind =
  | "info"
  | "expired"
  | "conflict"
  | "busy"
  | "rejected"
  | "offline"
  | "error";

export interface Notice {
  readonly kind: NoticeKind;
  readonly message: string;
  /** Whether the UI should reload the thread from the server to show what really happened. */
  readonly resync: boolean;
}

const CONFLICT_CODES = [
  "REPLAY_CONFLICT",
  "RESUME_SET_MISMATCH",
  "TOKEN_ALREADY_USED",
  "IDEMPOTENCY_CONFLICT",
  "CONTINUATION_CANCELLED",
  "DUPLICATE_INTERRUPT",
  "NO_OPEN_COHORT",
  "ALREADY",
];

/** Maps a RUN_ERROR (or problem body) code and message to a notice. */
export function noticeFor(code: string | undefined, message: string | undefined): Notice {
  const upper = (code ?? "").toUpperCase();
  const detail = (message ?? "").trim();
  if (upper.includes("EXPIRED")) {
    return {
      kind: "expired",
      message:
        "This question expired before your answer arrived, so nothing was booked. Cancel it to continue the conversation.",
      resync: true,
    };
  }
  if (CONFLICT_CODES.some((c) => upper.includes(c))) {
    return {
      kind: "conflict",
      message:
        "This question was already answered, perhaps in another tab. The recorded outcome is shown below.",
      resync: true,
    };
  }
  if (upper.includes("BUSY")) {
    return {
      kind: "busy",
      message:
        "This conversation is busy in another tab right now. Wait for it to finish, then try again.",
      resync: true,
    };
  }
  if (upper.includes("PAYLOAD") || upper.includes("INVALID_ENTRY") || upper.includes("SCHEMA")) {
    return {
      kind: "rejected",
      message: `The server did not accept that answer${detail ? `: ${detail}` : "."}`,
      resync: false,
    };
  }
  if (upper.includes("RESUME_REQUIRED")) {
    return {
      kind: "conflict",
      message: "The assistant is waiting for an answer to its question before it can go on.",
      resync: true,
    };
  }
  return {
    kind: "error",
    message: `Something went wrong${detail ? `: ${detail}` : "."}${code ? ` (${code})` : ""}`,
    resync: true,
  };
}

/** A failed HTTP exchange or network error thrown by the AG-UI client. */
export function noticeForFailure(error: unknown): Notice {
  const status = (error as { status?: unknown } | null)?.status;
  const payload = (error as { payload?: unknown } | null)?.payload;
  if (typeof status === "number") {
    const body = (typeof payload === "object" && payload !== null ? payload : {}) as Record<
      string,
      unknown
    >;
    const code = typeof body["code"] === "string" ? body["code"] : undefined;
    const detail =
      typeof body["detail"] === "string"
        ? body["detail"]
        : typeof body["title"] === "string"
          ? body["title"]
          : typeof payload === "string"
            ? payload
            : `HTTP ${status}`;
    return noticeFor(code ?? `HTTP_${status}`, detail);
  }
  return {
    kind: "offline",
    message:
      "Could not reach the server, so this was not sent. The page reconnects by itself; try again once it is back.",
    resync: false,
  };
}

/** The server closed the question when it expired (it said so on the thread's live tail). */
export const QUESTION_EXPIRED: Notice = {
  kind: "expired",
  message: "The question expired before it was answered, so nothing was booked. Ask again to continue.",
  resync: false,
};

/** Another tab (or client) answered the question this tab was showing. */
export const ANSWERED_ELSEWHERE: Notice = {
  kind: "info",
  message: "The question was answered in another tab. The recorded outcome is shown below.",
  resync: false,
};
