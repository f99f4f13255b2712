cmd_Release/obj.target/nasfuse/replies.o := g++ -o Release/obj.target/nasfuse/replies.o ../replies.cc '-DNODE_GYP_MODULE_NAME=nasfuse' '-DUSING_UV_SHARED=1' '-DUSING_V8_SHARED=1' '-DV8_DEPRECATION_WARNINGS=1' '-D_GLIBCXX_USE_CXX11_ABI=1' '-D_FILE_OFFSET_BITS=64' '-D_LARGEFILE_SOURCE' '-D__STDC_FORMAT_MACROS' '-DOPENSSL_NO_PINSHARED' '-DOPENSSL_THREADS' '-DNAPI_VERSION=8' '-DBUILDING_NODE_EXTENSION' -I/usr/include/node -I/usr/src -I/usr/deps/openssl/config -I/usr/deps/openssl/openssl/include -I/usr/deps/uv/include -I/usr/deps/zlib -I/usr/deps/v8/include  -fPIC -pthread -Wall -Wextra -Wno-unused-parameter -m64 -O3 -fno-omit-frame-pointer -fno-rtti -std=gnu++17 -std=c++17 -O2 -Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers -I/usr/include/fuse3 -MMD -MF ./Release/.deps/Release/obj.target/nasfuse/replies.o.d.raw   -c
Release/obj.target/nasfuse/replies.o: ../replies.cc ../replies.h \
 ../nasfuse.h /usr/include/fuse3/fuse_lowlevel.h \
 /usr/include/fuse3/fuse_common.h /usr/include/fuse3/libfuse_config.h \
 /usr/include/fuse3/fuse_opt.h /usr/include/fuse3/fuse_log.h \
 /usr/include/node/node_api.h /usr/include/node/js_native_api.h \
 /usr/include/node/js_native_api_types.h \
 /usr/include/node/node_api_types.h ../invalidate.h ../table.h
../replies.cc:
../replies.h:
../nasfuse.h:
/usr/include/fuse3/fuse_lowlevel.h:
/usr/include/fuse3/fuse_common.h:
/usr/include/fuse3/libfuse_config.h:
/usr/include/fuse3/fuse_opt.h:
/usr/include/fuse3/fuse_log.h:
/usr/include/node/node_api.h:
/usr/include/node/js_native_api.h:
/usr/include/node/js_native_api_types.h:
/usr/include/node/node_api_types.h:
../invalidate.h:
../table.h:
