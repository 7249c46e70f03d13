import "./style.css";
import { ChatApp } from "./app";

ChatApp.mount(document, new URL(window.location.href));
