/** Kill a program started in a process group of its own, with everything it started (git's transport helpers). */
export function killGroup(pid: number): void {
  try {
    process.kill(-pid, 'SIGKILL');
  } catch {
    // gone already
  }
}
