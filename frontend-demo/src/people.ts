// The demo's people (a traveller, a manager and a director), when the demo runs without an identity
// provider: `GET demo/people` says so and who is calling; switching sets the cookie the
// server's demo resolver reads (`pausemesh_demo_user`) and reloads the page as that person.

export const PERSON_COOKIE = "pausemesh_demo_user";

export interface Person {
  readonly id: string;
  readonly name: string;
  readonly roles: readonly string[];
}

export interface People {
  readonly current: string;
  readonly people: readonly Person[];
}

/** The answer of `GET demo/people`, or undefined when it is not a demo identity answer. */
export function readPeople(body: unknown): People | undefined {
  const record = body as { person?: unknown; people?: unknown } | null;
  if (record === null || typeof record !== "object") return undefined;
  if (typeof record.person !== "string" || !Array.isArray(record.people)) return undefined;
  const people: Person[] = [];
  for (const item of record.people) {
    const p = item as { id?: unknown; name?: unknown; roles?: unknown } | null;
    if (p === null || typeof p.id !== "string") continue;
    people.push({
      id: p.id,
      name: typeof p.name === "string" ? p.name : p.id,
      roles: Array.isArray(p.roles) ? p.roles.filter((r): r is string => typeof r === "string") : [],
    });
  }
  return people.some((p) => p.id === record.person) ? { current: record.person, people } : undefined;
}

/** The cookie that makes the demo server treat this browser as `person`. */
export function personCookie(person: string): string {
  return `${PERSON_COOKIE}=${encodeURIComponent(person)}; Path=/; SameSite=Strict; Max-Age=31536000`;
}

export async function fetchPeople(base: URL): Promise<People | undefined> {
  try {
    const response = await fetch(new URL("demo/people", base), {
      headers: { Accept: "application/json" },
      cache: "no-store",
    });
    return response.ok ? readPeople(await response.json()) : undefined;
  } catch {
    return undefined;
  }
}

/** Shows the switcher in `container`; a change reloads the page as the chosen person. */
export function mountSwitcher(container: HTMLElement, people: People, base: URL): void {
  const doc = container.ownerDocument;
  const label = doc.createElement("label");
  label.htmlFor = "person-select";
  label.textContent = "You are";
  const select = doc.createElement("select");
  select.id = "person-select";
  for (const person of people.people) {
    const option = doc.createElement("option");
    option.value = person.id;
    option.textContent = person.name;
    option.selected = person.id === people.current;
    select.append(option);
  }
  select.addEventListener("change", () => {
    doc.cookie = personCookie(select.value);
    const chosen = people.people.find((p) => p.id === select.value);
    // A person's conversations are their own: start on their page, not the other's thread.
    const target = new URL(".", base);
    // A manager or a director (to whom approvals escalate) starts on the approvals page.
    if (chosen !== undefined && chosen.roles.length > 0) target.searchParams.set("view", "approvals");
    window.location.assign(target.href);
  });
  container.replaceChildren(label, select);
  container.hidden = false;
}
