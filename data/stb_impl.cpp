// The one translation unit that compiles the stb implementations (Debian's
// libstb-dev ships headers plus a libstb.so; compiling the headers here keeps
// the build to the include path CMake already finds). Only the formats an
// image folder may hold are compiled in. Nothing else lives here: the
// sanitizer settings CMakeLists.txt gives this file cover stb's code only.
#define STB_IMAGE_IMPLEMENTATION
#define STBI_ONLY_PNG
#define STBI_ONLY_JPEG
#define STBI_ONLY_BMP
#define STBI_NO_STDIO
#define STB_IMAGE_WRITE_IMPLEMENTATION
#define STBI_WRITE_NO_STDIO
#define STB_IMAGE_RESIZE_IMPLEMENTATION
#include <stb_image.h>
#include <stb_image_resize.h>
#include <stb_image_write.h>
