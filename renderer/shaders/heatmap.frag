#version 450
// The heatmap layer: a grid of float values stretched over the image, bilinearly interpolated
// between cell centres (done here with texelFetch, so it does not depend on the device being
// able to filter R32_SFLOAT), mapped through a row of the colour map table.
layout(set = 0, binding = 0) uniform sampler2D grid;       // R32_SFLOAT, w x h
layout(set = 0, binding = 1) uniform sampler2D colormaps;  // RGBA8, 256 x rows, linear

layout(push_constant) uniform Heatmap {
    layout(offset = 16) float vmin;
    float vmax;
    float opacity;
    float row;       // colour map row in the table
    float rows;      // rows in the table
} hm;

layout(location = 0) in vec2 uv;
layout(location = 0) out vec4 color;

void main() {
    ivec2 size = textureSize(grid, 0);
    vec2 g = uv * vec2(size) - 0.5;
    vec2 base = floor(g);
    vec2 f = g - base;
    ivec2 lo = clamp(ivec2(base), ivec2(0), size - 1);
    ivec2 hi = clamp(ivec2(base) + 1, ivec2(0), size - 1);
    float v00 = texelFetch(grid, ivec2(lo.x, lo.y), 0).r;
    float v10 = texelFetch(grid, ivec2(hi.x, lo.y), 0).r;
    float v01 = texelFetch(grid, ivec2(lo.x, hi.y), 0).r;
    float v11 = texelFetch(grid, ivec2(hi.x, hi.y), 0).r;
    float v = mix(mix(v00, v10, f.x), mix(v01, v11, f.x), f.y);
    if (isnan(v))
        discard;
    float range = hm.vmax - hm.vmin;
    float t = range > 0.0 ? clamp((v - hm.vmin) / range, 0.0, 1.0) : (v >= hm.vmax ? 1.0 : 0.0);
    // Entry i of the table sits at texel centre (i + 0.5) / 256.
    vec2 lut = vec2((t * 255.0 + 0.5) / 256.0, (hm.row + 0.5) / hm.rows);
    color = vec4(texture(colormaps, lut).rgb, hm.opacity);
}
