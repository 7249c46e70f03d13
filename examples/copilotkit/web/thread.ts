/** The thread id lives in the URL (`?thread=`), so a reload or a second tab opens the same thread. */
export function threadFromUrl(location: Location, history: History): string {
  const url = new URL(location.href);
  const current = url.searchParams.get("thread");
  if (current) return current;
  const created = crypto.randomUUID();
  url.searchParams.set("thread", created);
  history.replaceState(null, "", url);
  return created;
}
