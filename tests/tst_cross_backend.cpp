int unused_cross = 0;
