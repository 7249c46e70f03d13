// Vite bundles stylesheets imported from modules.
declare module "*.css";
