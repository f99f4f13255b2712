// The node table (table.cc): ids, names, lookup counts, FORGET, and the hand-over's export and import.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>

#include "check.h"
#include "fixtures.h"
#include "../handover.h"

using namespace nas;
using namespace fixture;

TEST("bind: a name looked up gets its inode number as id, and the same name the same node") {
  Mount m;
  Node* d = look(m, ROOT, "d", dir(200));
  Node* f = look(m, 200, "f", attrs(201));
  CHECK_EQ(d->id, uint64_t{200});
  CHECK_EQ(f->id, uint64_t{201});
  CHECK_EQ(path(m, f), std::string("/d/f"));
  std::string p, top;
  CHECK(path_of(&m, f, p, &top));
  CHECK_EQ(top, std::string("d"));
  CHECK_EQ(look(m, 200, "f", attrs(201)), f);
  CHECK_EQ(f->nlookup, uint64_t{2});
  // A copy-up gives the path another inode number: it keeps its node (the kernel holds that id).
  CHECK_EQ(look(m, 200, "f", attrs(901)), f);
  CHECK_EQ(f->st.st_ino, ino_t{901});
}

TEST("bind: another type under a name is another file; the old node keeps its lookups but no name") {
  Mount m;
  Node* f = look(m, ROOT, "x", attrs(100));
  Node* d = look(m, ROOT, "x", dir(101));
  CHECK(d != f);
  CHECK_EQ(child(&m, ROOT, "x"), d);
  CHECK_EQ(get(&m, 100), f);
  CHECK(f->names.empty());
  CHECK_EQ(f->st.st_nlink, nlink_t{0});
}

TEST("hard links: a second name with the same number, size and change time is the same node") {
  Mount m;
  Node* a = look(m, ROOT, "a", attrs(100, S_IFREG, 2, 5, 7));
  Node* b = look(m, ROOT, "b", attrs(100, S_IFREG, 2, 5, 7));
  CHECK_EQ(b, a);
  CHECK_EQ(a->names.size(), size_t{2});
  CHECK_EQ(a->nlookup, uint64_t{2});
  // The first name goes (unlink): the node stays under the second, which now builds its path.
  unbind(&m, ROOT, "a");
  CHECK_EQ(child(&m, ROOT, "a"), nullptr);
  CHECK_EQ(child(&m, ROOT, "b"), a);
  CHECK_EQ(path(m, a), std::string("/b"));
}

TEST("hard links: the same number on a file that differs (or has one link) gets a private id") {
  Mount m;
  Node* a = look(m, ROOT, "a", attrs(100, S_IFREG, 2, 5, 7));
  Node* other_size = look(m, ROOT, "b", attrs(100, S_IFREG, 2, 6, 7));
  Node* one_link = look(m, ROOT, "c", attrs(100, S_IFREG, 1, 5, 7));
  CHECK(other_size != a && one_link != a && other_size != one_link);
  CHECK(other_size->id >= PRIVATE_IDS);
  CHECK(one_link->id >= PRIVATE_IDS);
  CHECK_EQ(get(&m, 100), a);
}

TEST("alias: LINK gives a node another name, replacing what that name stood for") {
  Mount m;
  Node* a = look(m, ROOT, "a", attrs(100));
  Node* old = look(m, ROOT, "l", attrs(101));
  alias(&m, a, ROOT, "l");
  CHECK_EQ(child(&m, ROOT, "l"), a);
  CHECK_EQ(a->names.size(), size_t{2});
  CHECK(old->names.empty());
}

TEST("unbind: a name goes; its node stays while the kernel holds it, and goes with its last lookup") {
  Mount m;
  Node* a = look(m, ROOT, "a", attrs(100));
  unbind(&m, ROOT, "a");
  unbind(&m, ROOT, "never-bound");
  CHECK_EQ(child(&m, ROOT, "a"), nullptr);
  CHECK_EQ(get(&m, 100), a);  // an open file, unlinked
  forget(&m, 100, 1);
  CHECK_EQ(get(&m, 100), nullptr);
}

TEST("forget: a node at zero lookups keeps its name (a file handle finds it by id) until the name goes") {
  Mount m;
  Node* a = look(m, ROOT, "a", attrs(100));
  look(m, ROOT, "a", attrs(100));
  forget(&m, 100, 1);
  CHECK_EQ(a->nlookup, uint64_t{1});
  forget(&m, 100, 1);
  CHECK_EQ(get(&m, 100), a);
  CHECK_EQ(a->nlookup, uint64_t{0});
  CHECK_EQ(child(&m, ROOT, "a"), a);
  CHECK(std::find(m.forgotten.begin(), m.forgotten.end(), uint64_t{100}) != m.forgotten.end());
  unbind(&m, ROOT, "a");
  CHECK_EQ(get(&m, 100), nullptr);
  // The root is the kernel's for as long as it is mounted; an id never given is nothing to forget.
  forget(&m, FUSE_ROOT_ID, 5);
  CHECK_EQ(get(&m, FUSE_ROOT_ID)->nlookup, uint64_t{1});
  forget(&m, 12345, 1);
  CHECK_EQ(get(&m, 12345), nullptr);
}

TEST("batch forget: each node of the list loses its own count") {
  Mount m;
  Node* a = look(m, ROOT, "a", attrs(100));
  look(m, ROOT, "a", attrs(100));
  Node* b = look(m, ROOT, "b", attrs(101));
  Node* c = look(m, ROOT, "c", attrs(102));
  look(m, ROOT, "c", attrs(102));
  look(m, ROOT, "c", attrs(102));
  unbind(&m, ROOT, "b");  // unlinked while held: goes at its last FORGET
  struct fuse_forget_data list[] = {{100, 2}, {101, 1}, {102, 1}, {999, 1}};
  forget_batch(&m, list, 4);
  CHECK_EQ(get(&m, 100), a);
  CHECK_EQ(a->nlookup, uint64_t{0});
  CHECK_EQ(get(&m, 101), nullptr);
  (void)b;
  CHECK_EQ(c->nlookup, uint64_t{2});
}

// Runs `body` in a child with its stderr into a pipe: what it wrote, and how it ended.
static std::string in_child(void (*body)(), int* status) {
  int fds[2];
  if (pipe(fds) != 0) return "pipe failed";
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], 2);
    close(fds[0]);
    body();
    _exit(0);
  }
  close(fds[1]);
  std::string out;
  char buf[512];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof buf)) > 0) out.append(buf, n);
  close(fds[0]);
  waitpid(pid, status, 0);
  return out;
}

static void forget_too_many() {
  Mount m;
  look(m, ROOT, "d", dir(200));
  look(m, 200, "f", attrs(201));
  forget(&m, 201, 3);
  // Not reached in a checked build. In a release build the count stops at 0 and the node is kept.
  if (get(&m, 201)->nlookup != 0) _exit(3);
}

TEST("FORGET of more lookups than a node has is said on stderr, naming the node; a checked build aborts") {
  int status = 0;
  std::string err = in_child(forget_too_many, &status);
  CHECK(err.find("FORGET of 3 lookups of node 201 /d/f, which has 1") != std::string::npos);
#ifdef NAS_CHECKED
  CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT);
#else
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
#endif
  if (err.find("FORGET") == std::string::npos) std::printf("  the child said: %s\n", err.c_str());
}

TEST("a reused inode number: a node the kernel forgot gives its number to the path that has it now") {
  Mount m;
  Node* d = look(m, ROOT, "d", dir(200));
  Node* a = look(m, 200, "a", attrs(100));
  forget(&m, 100, 1);
  d->listing = std::make_shared<Listing>();
  Node* b = look(m, 200, "b", attrs(100, S_IFREG, 1, 9));
  CHECK_EQ(b, a);
  CHECK_EQ(b->id, uint64_t{100});
  CHECK_EQ(child(&m, 200, "a"), nullptr);
  CHECK_EQ(b->names.size(), size_t{1});
  CHECK_EQ(path(m, b), std::string("/d/b"));
  CHECK_EQ(b->st.st_size, off_t{9});
  // The directory's listing still gave the old name that number: it goes.
  CHECK(d->listing == nullptr);
}

TEST("private ids: with privateIds every node gets one from 2^62 on, never one in use") {
  Mount m;
  m.private_ids = true;
  Node* a = look(m, ROOT, "a", attrs(100));
  Node* b = look(m, ROOT, "b", attrs(101));
  CHECK_EQ(a->id, PRIVATE_IDS);
  CHECK_EQ(b->id, PRIVATE_IDS + 1);
  m.next_private = PRIVATE_IDS;  // as after an import that held these
  Node* c = look(m, ROOT, "c", attrs(102));
  CHECK_EQ(c->id, PRIVATE_IDS + 2);
  CHECK_EQ(get(&m, PRIVATE_IDS + 2), c);
}

TEST("private ids: an inode number in the private range is never taken as an id") {
  Mount m;
  Node* n = look(m, ROOT, "odd", attrs(PRIVATE_IDS + 7));
  CHECK(n->id >= PRIVATE_IDS);
  CHECK_EQ(get(&m, n->id), n);
  CHECK_EQ(n->st.st_ino, ino_t{PRIVATE_IDS + 7});
}

TEST("move: a rename carries the node and its lookups to the new name; a target no one holds goes") {
  Mount m;
  look(m, ROOT, "d", dir(200));
  Node* a = look(m, ROOT, "a", attrs(100));
  look(m, 200, "t", attrs(101));
  forget(&m, 101, 1);
  move(&m, ROOT, "a", 200, "t");
  CHECK_EQ(child(&m, 200, "t"), a);
  CHECK_EQ(child(&m, ROOT, "a"), nullptr);
  CHECK_EQ(path(m, a), std::string("/d/t"));
  CHECK_EQ(a->nlookup, uint64_t{1});
  CHECK_EQ(get(&m, 101), nullptr);
  // A target the kernel still holds stays, with no name (an open file replaced by a rename).
  Node* held = look(m, 200, "u", attrs(102));
  move(&m, 200, "t", 200, "u");
  CHECK_EQ(child(&m, 200, "u"), a);
  CHECK_EQ(get(&m, 102), held);
  CHECK(held->names.empty());
  // A name the table does not know: only the target's binding goes.
  move(&m, ROOT, "unknown", 200, "u");
  CHECK_EQ(child(&m, 200, "u"), nullptr);
  CHECK_EQ(get(&m, 100), a);
}

TEST("move: one name of a hard link moves, the other stays") {
  Mount m;
  Node* a = look(m, ROOT, "a", attrs(100, S_IFREG, 2));
  look(m, ROOT, "b", attrs(100, S_IFREG, 2));
  move(&m, ROOT, "b", ROOT, "c");
  CHECK_EQ(child(&m, ROOT, "a"), a);
  CHECK_EQ(child(&m, ROOT, "c"), a);
  CHECK_EQ(child(&m, ROOT, "b"), nullptr);
  CHECK_EQ(a->names.size(), size_t{2});
}

TEST("export then import: a successor's table has the same ids (exact above 2^62), names and counts") {
  Mount m;
  m.private_ids = true;
  Node* d = look(m, ROOT, "d", dir(200));                                // 2^62
  Node* a = look(m, d->id, "a", attrs(100));                             // 2^62 + 1
  Node* b = look(m, d->id, "b", attrs(101));                             // 2^62 + 2
  look(m, d->id, "b", attrs(101));
  m.next_private = (1ull << 63) + 1;
  Node* c = look(m, ROOT, "c", attrs(102));                              // 2^63 + 1
  forget(&m, c->id, 1);                                                  // forgotten, kept by name
  Node* gone = look(m, ROOT, "gone", attrs(103));                        // 2^63 + 2, unlinked, held
  unbind(&m, ROOT, "gone");
  CHECK_EQ(b->id, PRIVATE_IDS + 2);
  std::vector<Exported> table = export_table(&m);
  CHECK_EQ(table.size(), size_t{6});  // with the root

  Mount next;
  next.private_ids = true;
  import_table(&next, table);
  CHECK_EQ(next.nodes.size(), m.nodes.size());
  for (Node* n : {d, a, b, c, gone}) {
    Node* same = get(&next, n->id);
    CHECK(same != nullptr);
    if (!same) continue;
    CHECK_EQ(same->nlookup, n->nlookup);
    CHECK(same->names == n->names);
    CHECK_EQ(path(next, same), path(m, n));
  }
  CHECK_EQ(child(&next, PRIVATE_IDS, "b")->id, PRIVATE_IDS + 2);
  CHECK_EQ(get(&next, FUSE_ROOT_ID)->nlookup, uint64_t{1});
  CHECK(std::find(next.forgotten.begin(), next.forgotten.end(), c->id) != next.forgotten.end());
  // The successor gives no id the kernel still holds to another file.
  CHECK(look(next, ROOT, "new", attrs(104))->id > gone->id);
}

TEST("the table as bytes for a successor: read back whole (ids exact up to 2^64), and nothing from bytes cut short") {
  std::vector<Exported> table = {Exported{~0ull, 3, {{PRIVATE_IDS + 1, "a"}, {FUSE_ROOT_ID, std::string("b\0c", 3)}}},
                                 Exported{PRIVATE_IDS + 1, 0, {}}, Exported{7, 1, {{FUSE_ROOT_ID, "x"}}}};
  std::string bytes = pack_table(table);
  std::vector<Exported> back;
  CHECK(unpack_table(bytes.data(), bytes.size(), back));
  CHECK_EQ(back.size(), table.size());
  for (size_t i = 0; i < back.size() && i < table.size(); i++) {
    CHECK_EQ(back[i].id, table[i].id);
    CHECK_EQ(back[i].nlookup, table[i].nlookup);
    CHECK(back[i].names == table[i].names);
  }
  for (size_t cut : {size_t{0}, size_t{3}, size_t{9}, size_t{28}, bytes.size() - 1}) {  // 8: the header alone, an empty table
    std::vector<Exported> partial;
    CHECK(!unpack_table(bytes.data(), cut, partial));
  }
  std::string other = bytes;
  other[0] = 'X';  // not a table
  std::vector<Exported> none;
  CHECK(!unpack_table(other.data(), other.size(), none));
}

TEST("import: an entry without an id (0) or for the root is left out") {
  Mount next;
  import_table(&next, {Exported{0, 1, {{FUSE_ROOT_ID, "zero"}}}, Exported{FUSE_ROOT_ID, 9, {}}});
  CHECK_EQ(next.nodes.size(), size_t{1});
  CHECK_EQ(get(&next, FUSE_ROOT_ID)->nlookup, uint64_t{1});
  CHECK_EQ(child(&next, FUSE_ROOT_ID, "zero"), nullptr);
}

TEST("a directory's listing: an entry added, changed and removed; an open directory keeps the one it read") {
  Node d;
  listing_add(&d, "x", attrs(1));  // no listing: nothing to keep current
  CHECK(d.listing == nullptr);
  d.listing = std::make_shared<Listing>();
  listing_add(&d, "x", attrs(1));
  listing_add(&d, "y", attrs(2));
  listing_add(&d, "z", attrs(3));
  std::shared_ptr<Listing> open_dir = d.listing;
  listing_add(&d, "x", attrs(11));
  struct stat was {};
  CHECK(listing_remove(&d, "x", &was));
  CHECK_EQ(was.st_ino, ino_t{11});
  CHECK(!listing_remove(&d, "x"));
  CHECK_EQ(d.listing->names.size(), size_t{2});
  CHECK_EQ(d.listing->index.size(), size_t{2});
  for (size_t i = 0; i < d.listing->names.size(); i++) CHECK_EQ(d.listing->index.at(d.listing->names[i]), i);
  CHECK_EQ(d.listing->attrs[d.listing->index.at("z")].st_ino, ino_t{3});
  CHECK(open_dir != d.listing);
  CHECK_EQ(open_dir->names.size(), size_t{3});
  CHECK_EQ(open_dir->attrs[0].st_ino, ino_t{1});
}
