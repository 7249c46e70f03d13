import "./style.css";
import { ChatApp } from "./app";
import { ApprovalsView } from "./approvals";
import { fetchPeople, mountSwitcher } from "./people";
import { mountSidebarToggle, Sidebar } from "./sidebar";

const location = new URL(window.location.href);
const base = new URL(".", location);

function byId<T extends HTMLElement>(id: string): T {
  const element = document.getElementById(id);
  if (element === null) throw new Error(`#${id} is missing from the page`);
  return element as T;
}

async function showPeople(): Promise<void> {
  const people = await fetchPeople(base);
  if (people === undefined) return;
  mountSwitcher(byId("person"), people, base);
  byId("approvals-link").hidden = false;
}

function approvalsCount(count: number): void {
  const badge = byId("approvals-count");
  badge.textContent = count > 0 ? `${count} waiting` : "";
  badge.hidden = count === 0;
}

if (location.searchParams.get("view") === "approvals") {
  byId("chat").hidden = true;
  byId("approvals").hidden = false;
  byId("approvals-link").setAttribute("aria-current", "page");
  document.title = "Approvals · PauseMesh demo";
  // The message box is not on this page: the skip link leads past the sidebar to the filters.
  const skip = byId<HTMLAnchorElement>("skip-link");
  skip.href = "#filter-tag";
  skip.textContent = "Skip to the approval requests";
  mountSidebarToggle(byId("approvals-sidebar-toggle"));
  new Sidebar({
    list: byId("thread-list"),
    status: byId("sidebar-status"),
    base,
    location,
    current: undefined,
    onCurrentTitle: () => undefined,
  }).start();
  void showPeople().then(() => {
    byId("approvals-link").hidden = false;
    new ApprovalsView(byId("approvals-list"), byId("approvals-status"), base, approvalsCount).start(
      byId<HTMLFormElement>("approvals-filters"),
    );
    document.body.dataset["ready"] = "true";
  });
} else {
  ChatApp.mount(document, location);
  void showPeople();
}
