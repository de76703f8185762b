{
  "variables": {
    "has_jpeg": "<!(node has-jpeg.mjs)"
  },
  "targets": [
    {
      "target_name": "optmark_fingerprint",
      "sources": [
        "src/addon.cc",
        "src/prefilter.cc",
        "src/v1-core.cc",
        "src/v2-spectrum.cc",
        "src/v2-lattice.cc",
        "src/v2-fold.cc",
        "src/v2-sync.cc",
        "src/v2-core.cc"
      ],
      "include_dirs": [
        "<!(node -p \"require('node-addon-api').include_dir\")"
      ],
      "defines": [
        "NAPI_VERSION=8",
        "NAPI_DISABLE_CPP_EXCEPTIONS",
        "NODE_ADDON_API_DISABLE_DEPRECATED"
      ],
      "cflags!": [
        "-fno-exceptions",
        "-O2",
        "-O0"
      ],
      "cflags_cc!": [
        "-fno-exceptions",
        "-O2",
        "-O0"
      ],
      "cflags_cc": [
        "-O3",
        "-std=c++17",
        "-fno-math-errno",
        "-ffp-contract=off"
      ],
      "xcode_settings": {
        "GCC_OPTIMIZATION_LEVEL": "3",
        "CLANG_CXX_LANGUAGE_STANDARD": "c++17",
        "OTHER_CPLUSPLUSFLAGS": [
          "-fno-math-errno",
          "-ffp-contract=off"
        ]
      },
      "msvs_settings": {
        "VCCLCompilerTool": {
          "Optimization": 2,
          "FloatingPointModel": 0
        }
      }
    },
    {
      "target_name": "optmark_bytes",
      "sources": [
        "src/bytes.cc"
      ],
      "include_dirs": [
        "<!(node -p \"require('node-addon-api').include_dir\")"
      ],
      "defines": [
        "NAPI_VERSION=8",
        "NAPI_DISABLE_CPP_EXCEPTIONS",
        "NODE_ADDON_API_DISABLE_DEPRECATED"
      ],
      "cflags!": [
        "-fno-exceptions",
        "-O2",
        "-O0"
      ],
      "cflags_cc!": [
        "-fno-exceptions",
        "-O2",
        "-O0"
      ],
      "cflags_cc": [
        "-O3",
        "-std=c++17"
      ]
    }
  ],
  "conditions": [
    [
      "has_jpeg==1",
      {
        "targets": [
          {
            "target_name": "optmark_jpeg",
            "sources": [
              "src/jpeg.cc"
            ],
            "include_dirs": [
              "<!(node -p \"require('node-addon-api').include_dir\")"
            ],
            "defines": [
              "NAPI_VERSION=8",
              "NAPI_DISABLE_CPP_EXCEPTIONS",
              "NODE_ADDON_API_DISABLE_DEPRECATED"
            ],
            "cflags!": [
              "-fno-exceptions",
              "-O2",
              "-O0"
            ],
            "cflags_cc!": [
              "-fno-exceptions",
              "-O2",
              "-O0"
            ],
            "cflags_cc": [
              "-O2",
              "-std=c++17"
            ],
            "libraries": [
              "-ljpeg"
            ]
          }
        ]
      }
    ]
  ]
}
