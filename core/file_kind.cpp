#include "core/file_kind.h"

#include "core/error.h"
#include "core/h5/h5.h"

namespace glimpse {

FileKind identifyGlimpseFile(const std::string& path) {
    h5::File f = h5::File::open(path, h5::File::Mode::Read);
    const auto header = h5::readHeader(f);
    if (!header) throw Error(path + " is not a Glimpse file (no 'kind' attribute)");
    FileKind k;
    k.kind = header->kind;
    k.formatVersion = header->formatVersion;
    if (f.hasGroup("meta")) {
        const h5::Group meta = f.group("meta");
        if (meta.hasAttr("family")) k.family = meta.attrString("family");
    }
    return k;
}

} // namespace glimpse
