// nodegit ships no types; src/store is its only user and wraps it in typed functions.
declare module 'nodegit';
