{
  "targets": [
    {
      "target_name": "nasfuse",
      "sources": ["addon.cc", "ops.cc", "cache.cc", "replies.cc", "table.cc", "invalidate.cc", "handover.cc", "pidns.cc", "system.cc", "listings.cc", "files.cc", "grants.cc", "calls.cc"],
      "cflags_cc": ["-std=c++17", "-O2", "-Werror", "-Wall", "-Wextra", "-Wno-unused-parameter", "-Wno-missing-field-initializers", "<!@(pkg-config --cflags fuse3)"],
      "cflags_cc!": ["-fno-exceptions", "-std=gnu++14", "-std=gnu++1y"],
      "libraries": ["<!@(pkg-config --libs fuse3)", "-lpthread"],
      "defines": ["NAPI_VERSION=8"]
    },
    {
      "target_name": "nas-hup-guard",
      "type": "loadable_module",
      "sources": ["hup-guard.cc"],
      "cflags_cc": ["-std=c++17", "-O2", "-Werror", "-Wall", "-Wextra"],
      "cflags_cc!": ["-std=gnu++14", "-std=gnu++1y"]
    }
  ]
}
