{
  "variables": {
    # 1: also build the test addon (kpng_test_native, test/native/), which only tests load. Set by
    # hack/build-native.sh for a development build; a prebuild or an install from the npm tarball
    # (which holds no test/) builds the product addon alone.
    "kpng_test_native%": 0,
    "kpng_cflags": ["-O2", "-Wall", "-Wno-missing-field-initializers", "<!@(pkg-config --cflags libnftnl libmnl libbpf)"],
    "kpng_libs": ["<!@(pkg-config --libs libnftnl libmnl libbpf)"]
  },
  "target_defaults": {
    "include_dirs": ["<!(node -p \"require('node-addon-api').include_dir\")"],
    "defines": ["NAPI_VERSION=8", "NAPI_DISABLE_CPP_EXCEPTIONS", "_GNU_SOURCE"],
    "cflags_cc": ["<@(kpng_cflags)"],
    "libraries": ["<@(kpng_libs)"]
  },
  "targets": [
    {
      "target_name": "kpng_native",
      "sources": [
        "native/addon.cc",
        "native/nft_apply.cc",
        "native/nft_dump.cc",
        "native/nft_list.cc",
        "native/nft_monitor.cc",
        "native/conntrack.cc",
        "native/netlink_batch.cc",
        "native/ipvs.cc",
        "native/rtnl.cc",
        "native/ipset.cc",
        "native/iptables_legacy.cc",
        "native/sysctl.cc",
        "native/ebpf/handles.cc",
        "native/ebpf/pins.cc",
        "native/ebpf/loader.cc",
        "native/ebpf/links.cc",
        "native/ebpf/maps.cc",
        "native/ebpf/sockets.cc",
        "native/ebpf/cgroups.cc",
        "native/ebpf/cleanup.cc",
        "native/peercred.cc",
        "native/malloc.cc"
      ]
    }
  ],
  "conditions": [
    ["'<(kpng_test_native)'=='1'", {
      "targets": [
        {
          "target_name": "kpng_test_native",
          "include_dirs": ["native"],
          "sources": [
            "test/native/test_addon.cc",
            "test/native/nft_list_full.cc",
            "native/nft_dump.cc",
            "native/netlink_batch.cc"
          ]
        }
      ]
    }]
  ]
}
